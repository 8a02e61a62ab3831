"""ZooKeeper (kazoo): the connect string, a client with bounded waits, and the job model a standalone Samza
job (ZkJobCoordinator) keeps there."""
