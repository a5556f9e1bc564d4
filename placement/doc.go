// Package placement decides which members of a registry a placement chooses, from a policy, with
// no I/O: given the policy, the candidate Clusters (their labels and status), the previous
// decision and the time, Decide returns the new decision and, for every candidate, the one
// reason it is in or out. Same inputs, same answer, on every replica.
//
// A policy narrows the candidates (a label selector, a CEL expression over the
// Cluster, names to exclude, names to include whatever the selector says), keeps members that
// are not Ready out unless a toleration for their Ready reason still holds, and, with a count,
// chooses that many, spread across the values of a label if asked. Decisions do not churn: a
// chosen member stays chosen while it still fits, new members only fill free room (an unrelated
// join changes nothing), and a member's rollout group, once given, is kept.
//
// On a member's status.resources (a capacity controller's), a policy's fit chooses only members
// with room and its preferences order them by score; figures missing or too old are reasons of
// their own. A member chosen before stays while its allocatable still holds fit, whatever its
// score, unless the policy's rebalance lets it give way, once per cooldown.
//
// The scheduler that writes decisions as SIG Multicluster's PlacementDecision, and the consumers
// that follow them, build on this package.
package placement
