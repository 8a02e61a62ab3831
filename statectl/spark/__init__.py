"""Spark: the PySpark jobs launched with spark-submit (bulk adstore build, rescale), and the probe that says
whether this machine can launch them (Java and pyspark). pyspark is imported inside functions only."""
