"""``gpu-platform job``: training jobs on a training fleet, through the environment's job document.

- ``context``: the environment, its AWS clients and the one-line errors every job command prints
- ``nodes``: which nodes of a fleet a job runs on (``pick_nodes``), its rendezvous, processes per node
- ``remote``: the job document run on nodes (``send``) and its invocations awaited (``wait``)
- ``history``: the jobs started earlier, from the document's command history (``launches``)
- ``launch``: ``job run`` (a new job or ``--resume``), its arguments checked first (``ops/args.py``)
- ``logs``: a job's output from its log streams
- ``render``: what the commands print (plan and progress on stderr, tables on stdout)
- ``command``: the Typer sub-app ``job`` (``job fabric-test``, which builds on these modules, is ops/fabric's, registered by ops/cli.py)
"""
