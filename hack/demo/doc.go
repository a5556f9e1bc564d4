// Command demo is the README's one-command tour. It starts a local fleet (a registry and three
// member clusters, real kube-apiservers with etcd), shows the registry with kubectl, runs the
// health controller, the placement scheduler and the releases controller (clusterregistry
// controllers) beside it, places a Deployment with a Placement (examples/fanout-deploy
// --placement), delivers an app with a Release and keeps it there (an edit by hand corrected),
// runs cmd/fleet-api on watch caches, stops one member to show the controller see it, the
// placement keep it within its toleration, fanout-deploy report it, fleet-api mark it stale and a
// new revision roll out in waves past it (Unreachable, its last revision kept), brings it back,
// takes a member out of the placement (the release's objects removed there), then stops
// everything and removes its files, also on Ctrl-C.
// hack/demo.sh builds the binaries it needs and runs it; with -keep the fleet stays up until
// Ctrl-C.
package main
