// Command fleet-api answers "what runs where" for every member cluster of a registry, from watch
// caches on the members (package fleetcache) rather than a request per member per question, and
// lets each caller see and change Clusters and Releases, and steer rollouts, as the registry lets
// them: the seeds' Optikon /cluster API, a server to deploy (its image: hack/image --command
// ./cmd/fleet-api; the chart's fleetAPI), with a dashboard at /.
//
//	fleet-api -n fleet --listen 127.0.0.1:8080
//
//	GET    /clusters                    every member the caller may list: Ready, reason, version,
//	                                    nodes, Pods and Deployments (each ready of total), and
//	                                    how current the member's caches are (Synced, or Stale
//	                                    since when and why); ?labelSelector= and ?fieldSelector=
//	                                    (metadata.name, metadata.namespace) choose
//	GET    /watch/clusters              a stream of what GET /clusters answers and its changes, one
//	                                    JSON event a line (ADDED, MODIFIED, DELETED, BOOKMARK);
//	                                    ?resourceVersion=N resumes after the revision a list or an
//	                                    event gave (410 Expired when no longer kept); a member
//	                                    is sent again only when what GET /clusters says of it
//	                                    changed
//	GET    /watch/clusters/{namespace}/{name}
//	                                    one member's stream (RBAC: watch on that Cluster)
//	GET    /clusters/{namespace}/{name} one member, with its nodes and Deployments (and its Pods counted)
//	POST   /clusters                    register a Cluster (a JSON Cluster, metadata.namespace set)
//	PUT    /clusters/{namespace}/{name} replace a Cluster (a JSON Cluster)
//	PATCH  /clusters/{namespace}/{name} change a Cluster (a JSON merge patch)
//	DELETE /clusters/{namespace}/{name} remove a Cluster from the registry
//	DELETE /clusters?namespace=NS       remove the set's Clusters that ?labelSelector= and
//	                                    ?fieldSelector= choose (every one without them), as the
//	                                    registry's deletecollection; answers what it deleted
//	GET    /releases                    every Release of the sets where the caller may list
//	                                    Releases, whatever its source (manifests, a ConfigMap, a
//	                                    chart and its mode), with conditions and each member's
//	                                    phase; notPermitted names each set whose Releases the
//	                                    caller may not list, and why
//	GET    /watch/releases              what GET /releases answers, then each change
//	GET    /releases/{namespace}/{name}/rollout
//	                                    where a Release's rollout stands: its waves in order
//	                                    (each member with its phase, the current one marked,
//	                                    when each began and ended, its progress deadline), its
//	                                    revisions by number (change cause, what each delivered,
//	                                    which is lastCompleteRevision), and the rollout actions
//	                                    the caller may take (RBAC: update releases)
//	POST   /releases/{namespace}/{name}/{action}
//	                                    a rollout action as the caller, as `clusterregistry
//	                                    rollout` does it (package rollout): approve ({wave}),
//	                                    pause, resume, restart, undo ({toRevision}); 400 for a
//	                                    wave or revision the Release does not have, 409 for one
//	                                    its state refuses (already paused, nothing to approve)
//	GET    /charts                      the chart releases (Releases whose source is a chart) of
//	                                    the sets where the caller may list Releases, each with
//	                                    its chart, the version and digest delivered, conditions
//	                                    and every member's phase (?namespace= for one set)
//	GET    /charts/{namespace}/{name}   one chart release
//	POST   /charts                      release a chart on a Placement's members: {namespace,
//	                                    name, placement, targetNamespace, chart: {url, chart,
//	                                    version, digest, secretRef} or {configMap}, values,
//	                                    memberValues}, a Release created as the caller
//	PUT    /charts/{namespace}/{name}   replace its chart, values and member values (same body)
//	PATCH  /charts/{namespace}/{name}   change its version and values: {version, values}
//	DELETE /charts/{namespace}/{name}   remove it (the releases controller removes its objects)
//	GET    /watch/charts                what GET /charts answers, then each change (a version
//	                                    delivered, a member's phase), one JSON event a line, as
//	                                    /watch/clusters streams members (?namespace= for one set)
//
// Optikon's v0 API, for its UI (base path /v0, the -n cluster set or --optikon-cluster-set's; errors are Optikon's
// APIResponse, {"code": "404", "message": ...}; package internal/optikon, on the native routes'
// operations):
//
//	GET    /v0/clusters                 the set's Clusters as the registry has them, each with the
//	                                    annotations NumPods (the member's Pods, "unknown" when
//	                                    its caches cannot say) and Health (Green: Ready and its
//	                                    caches current; Yellow: Ready but not current, or not
//	                                    probed; Red: not Ready) computed at answer time
//	POST   /v0/clusters                 register a Cluster (201); NumPods and Health are dropped,
//	                                    the caller's own annotations (Lat, Long) kept
//	GET    /v0/clusters/{clusterId}     one Cluster, annotated as in the list
//	PUT    /v0/clusters/{clusterId}     replace it (200)
//	DELETE /v0/clusters/{clusterId}     remove it (200)
//	GET    /v0/releases                 every Helm-mode chart Release of the set, once per cluster
//	                                    ?labels=K=V,K=V selects (every one without) that Helm
//	                                    reports it on, as Helm there reports it: Name, Namespace,
//	                                    Version (its revision on that cluster), OnCluster,
//	                                    Chart.Metadata, Info (Status.Code in Helm 2's words, as
//	                                    Optikon's API gave them; first and last deployed), Config
//	                                    (the Release's own values, never the member's, which
//	                                    merge in valuesFrom Secrets);
//	                                    from the server's watch of the Releases and its caches of
//	                                    Helm's storage Secrets on the members (summarized as they
//	                                    arrive), so a poll asks nothing of members or registry
//	POST   /v0/releases                 multipart/form-data, as Optikon's UI sends it: chartTar
//	                                    (a packaged chart, at most 768 KiB, unpacking to at most
//	                                    chartrender's bound, no path out of the chart), name and
//	                                    namespace (DNS labels): the chart kept in a Secret of the
//	                                    set (named by its digest), a Placement of the clusters
//	                                    ?labels= selects (every one without), and a Release of it
//	                                    in Helm mode into namespace (made where missing), each
//	                                    made as the caller; a failure part way removes what was
//	                                    made (201)
//	GET    /v0/releases/{releaseId}     the release on the first cluster (by name) ?labels= selects
//	PUT    /v0/releases/{releaseId}     multipart/form-data chartTar: upgraded on its clusters, a
//	                                    new revision on each (200); ?labels= must be what it was
//	                                    made for: upgrading some of its clusters alone is refused
//	DELETE /v0/releases/{releaseId}     without ?labels=, removed everywhere (Release, Placement,
//	                                    chart Secrets); with it, from the clusters it selects,
//	                                    which its Placement then excludes by name (from its last
//	                                    clusters: removed everywhere) (200)
//
// --cors-allowed-origin lets pages of an origin (Optikon's UI, served apart) call the API from a
// browser: preflights for every method with Authorization are answered, and answers carry
// Access-Control-Allow-Origin for that origin alone (with credentials, never *).
//
// Every request acts for its caller: it must carry credentials the registry accepts (a bearer
// token, checked with a TokenReview; with TLS and --client-ca-file, a client certificate), and
// sees and changes only what the registry's RBAC lets that caller see and change in the registry
// itself (list, watch, get, create, update, patch, delete, deletecollection on clusters in a
// cluster set). Writes are sent
// as the caller (impersonation), so the registry decides and its audit log names them. Answers
// about a caller are kept for 10 seconds. Without TLS it serves only on a loopback address.
//
// Errors are Kubernetes Status objects, as an API server writes them. The registry is reached with
// kubectl's connection flags (--kubeconfig, --context, -n, ...), the members with the credentials
// their Clusters point to, within the trust flags (--allow-exec, --file-root, ...). Its own
// identity in the registry needs: create tokenreviews and subjectaccessreviews; impersonate users,
// groups, serviceaccounts and userextras; list and watch clusters, releases and
// releasestatusslices, get secrets, and get and list placementdecisions, in the sets it serves.
package main
