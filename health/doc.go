// Package health is a controller that keeps every Cluster's status true: it probes each member's
// API server with the credentials a tool would use (through a access.Resolver), and writes
// the Ready condition, the member's version, its identity (the kube-system namespace's UID) and
// the time of the last probe, with server-side apply on the status subresource.
//
// Ready means reachable and usable: the API server answered /readyz (or /healthz where /readyz
// is absent) and /version with the credentials. Its reasons tell the cases apart: Reachable,
// Unreachable, NotReady (naming the failing checks), Unauthorized, CredentialsUnavailable (naming
// the providers), NoEndpoint, IdentityChanged (the endpoints now lead to another cluster) and
// NotProbed (Unknown: not probed for too long).
//
// A state must persist for a number of probes before the condition changes, so one lost answer
// does not flap it. The registry sees a write only when something changed, or once per
// heartbeat to refresh lastProbeTime, and a Kubernetes Event on every transition. Probes are
// bounded in number, jittered, and scheduled from one queue: an idle member holds no goroutine.
// They fall due on ticks (a fiftieth of the interval), so that a process wakes once for a tick's
// probes rather than once for each.
//
// Run it in a tool with New and Run, or as the `clusterregistry health` command.
//
// Its probes and its status writes run on controller-runtime's controller ("health" and
// "health-writes": their priority queues, workers, metrics and logs), each member one key,
// added with a due time (AddAfter) rather than on an event. The ticks still batch each
// fiftieth of the interval's probes into one wake of the queue. BenchmarkHealth held its
// figures against the loop of its own that it replaced (docs/performance.md: 2-6 % more CPU
// per probe, 2.4 times the target's 1,000 probes/s on one core).
//
// Options.LeaderElection (election.Run) is for a Controller run on its own, in a tool's main;
// hosted in a controller-runtime Manager (package controllers, `clusterregistry health` and
// `controllers`), the Manager elects, and LeaderElection stays nil.
package health
