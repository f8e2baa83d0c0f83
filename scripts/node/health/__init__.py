"""The GPU health check's parts (run by ``gpu_health.py`` beside this folder): tool output to facts
(``parse``, ``dcgm``, ``efa``), the Xid policy (``xids`` + ``xid_catalog.csv``), facts to a verdict
(``decide``), running the tools (``probe``) and acting on the verdict (``act``)."""
