"""Slurm on AWS Parallel Computing Service (PCS) for the ``scheduler: slurm`` training fleets: the environment's
one cluster and its security groups, the login nodes, and per fleet a queue over one compute node group per
purchase option, launched from the fleet's launch template. The config side (what PCS takes, the node groups of
a fleet) is config/slurm.py and config/fleets/scheduler.py; no construct here decides a number itself."""
