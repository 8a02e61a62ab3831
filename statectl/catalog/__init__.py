"""The catalog: what snapshots exist, which store they belong to, who may write (leases) and read (pins)
them, and what retention keeps. Built on the blob store and, for Samza jobs, the Kafka checkpoint topic."""
