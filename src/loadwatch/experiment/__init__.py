"""`loadwatch experiment`: arms x workloads x load levels, repeated, with verdicts that know noise."""
