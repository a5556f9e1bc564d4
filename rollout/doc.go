// Package rollout changes a Release's rollout as `clusterregistry rollout` does, for any client
// of the registry: approve the next wave, pause and resume, restart, and undo to an earlier
// revision. The command and fleet-api's page call the same functions, so a Release is changed
// alike whoever asks; each acts with the client it is given, so the registry decides, as the
// caller, whether it may.
//
//	approved, err := rollout.Approve(ctx, client.ClusterregistryV1alpha1(), "fleet", "web", 0)
//
// Errors a caller must tell apart are typed: *InvalidError for a wave or revision the Release
// does not have (the command's exit 2, an API's 400), *RefusedError for a change the Release's
// state refuses (already paused, nothing waits for approval: exit 1, an API's 409). Errors of
// the registry (not found, forbidden, a conflict retried too often) are returned wrapped, so
// apierrors' predicates still answer.
package rollout
