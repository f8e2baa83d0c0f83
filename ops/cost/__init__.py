"""``gpu-platform cost``: what an environment costs per hour and month, from its config and a price table.

``prices`` reads the table (``prices.yaml`` and the catalog's On-Demand column), ``mix`` splits a
fleet's instances into On-Demand, Spot and reserved parts and prices them, ``shared`` prices what
is not a fleet (FSx for Lustre, NAT, endpoints, EBS, CloudWatch), ``live`` refreshes Spot and
Capacity Block prices from the account, ``report`` puts it together for people and machines.
"""
