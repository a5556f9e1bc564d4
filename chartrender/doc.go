// Package chartrender renders Helm charts for delivery to many members, with Helm 4's own chart
// loader, engine and manifest sorter (helm.sh/helm/v4): what a Release in render mode applies is
// what `helm template` prints for the same chart, values and Kubernetes version.
//
// A Renderer renders once per distinct input (the chart's digest, the values, the release's name
// and namespace, the member's Kubernetes version and API versions) and shares the result between
// the members that ask for the same input at once or later: a Release whose per-member values
// take three regions' settings renders three times, not once per member.
//
// Render mode runs no hooks: a chart with a hook (helm.sh/hook: pre-install, post-upgrade...)
// is refused with a *HookError naming each hook's template and events, as its hooks would
// otherwise be silently skipped or applied as plain objects. Test hooks (helm.sh/hook: test) are
// what `helm test` runs, never part of an install: they are left out. A chart's crds/ come first,
// as Helm installs them.
//
// Charts are loaded from their packaged archives (Load) with a limit on what they unpack to,
// smaller than Helm's process-wide 100 MiB, so that a chart cannot make a controller that holds
// many of them run out of memory.
package chartrender
