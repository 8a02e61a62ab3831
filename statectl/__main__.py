from statectl.cli.main import run

run()
