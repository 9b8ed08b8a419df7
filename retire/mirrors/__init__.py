"""Local git mirrors of upstream repositories: the air-gapped evidence path.

``config`` says which mirror answers for which repository (``patchlane.toml``;
``project_mirrors`` loads a project's), ``repo`` reads one (the commit that landed a pull
request, the release tags that contain a commit, branch tips, freshness), and ``sync`` fetches
them where the network allows (``patchlane mirrors sync``).
"""
