"""``gpu-platform cost``: what an environment costs per hour and month, from its config and a price table.

``prices`` reads the table (``prices.yaml`` and the catalog's On-Demand column; other regions from their own
sections, or a one-line refusal), ``schedule`` follows a fleet's scheduled actions over a year (hours a month at
each size), ``mix`` splits a fleet's instances into On-Demand, Spot and reserved parts and prices them,
``blocks`` prices a Capacity Block's window (paid once), ``commitments`` the Savings Plan view of what runs
On-Demand all month, ``shared`` what is not a fleet (FSx for Lustre, NAT, endpoints, EBS, warm pools,
CloudWatch), ``left_out`` names what is not priced, ``live`` refreshes Spot and Capacity Block prices from the
account, ``report`` puts it together as one JSON document and ``render`` prints it for people.
"""
