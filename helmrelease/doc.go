// Package helmrelease runs Helm's own actions (install, upgrade, rollback, uninstall, status)
// on one member, for a Release in Helm mode: the release is Helm's, kept in Helm's Secrets on the
// member, so `helm ls` there shows it and Helm's own tools act on it.
//
// It avoids what hurt the projects that run Helm per member:
//
//   - One action.Configuration per operation, never shared: Helm's actions keep state in their
//     Configuration, and sharing one between concurrent operations races (helm#11169, #9366).
//   - Discovery and REST mapping shared per member (Member): each operation's RESTClientGetter
//     hands out the member's one cached discovery client and mapper, so a member is discovered
//     once, not once per action (Sveltos addon-controller#1644, k0rdent kcm#3008), and again
//     only when told its API versions changed (Member.Invalidate). A caller that keeps its own
//     discovery of the member (the releases controller) shares it (NewMember), so the member is
//     discovered once for both.
//   - A deadline per operation (Options.Timeout), so an unreachable member costs only that.
//
// The member's rest.Config is the caller's, as the SDK resolves it (package access): pinned to
// the member's server on every request, so Helm's requests go nowhere else. A Member is kept
// while credentials rotate: give it multicluster.Member.TransportConfig, whose requests carry the
// member's credentials as they are when sent.
package helmrelease
