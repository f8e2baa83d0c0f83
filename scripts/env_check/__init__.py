"""The post-deploy check of one environment, in four steps (``scripts/check_environment.py`` is its CLI).

- ``expectations``: what a healthy deployment looks like, from the environment's config and names;
- ``aws``: reads from the AWS APIs, and AWS errors as one line each;
- ``judge``: each check compares what AWS reports with the expectations (``CHECKS``);
- ``report``: the text or JSON report.
"""
