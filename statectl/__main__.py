from statectl.cli.entry import run

run()
