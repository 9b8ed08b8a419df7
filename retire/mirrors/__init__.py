"""Local git mirrors of upstream repositories: the air-gapped evidence path.

``config`` says which mirror answers for which repository (``patchlane.toml``;
``project_mirrors`` loads a project's), ``resolve`` finds the mirror of a distribution once for
every command (a lane revision, a link, its metadata URLs, its name and release tags), ``repo``
reads one (the commit that landed a pull request, the release tags that contain a commit, branch
tips, freshness), ``history`` lists the first-parent commits between two release tags with their
pull requests (``patchids``: those of rebase and squash merges, by patch) and whether the package
builds from source cheaply there, ``touching`` (which of those commits change the files a shim
patches), ``packagetree`` (which files of a commit the package's build reads, and which of them a
damaged mirror lacks) and ``sync`` fetches them where the network allows (``patchlane mirrors
sync``). A bug's window, its commit runs ordered by a mirror, lives in :mod:`retire.history`.
"""
