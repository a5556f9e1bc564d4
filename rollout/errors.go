package rollout

// InvalidError is a request that names what the Release does not have: a wave past its last, a
// revision its history does not hold. The caller asked wrongly; asking again the same way fails
// the same way.
type InvalidError struct{ Message string }

func (e *InvalidError) Error() string { return e.Message }

// RefusedError is a change the Release's state refuses now: pausing a paused Release, approving
// a rollout whose approval is Automatic, or one the releases controller has not rendered yet.
type RefusedError struct{ Message string }

func (e *RefusedError) Error() string { return e.Message }

// Ref is how a Release is named in messages, as kubectl names a Deployment
// (deployment.apps/web).
func Ref(name string) string { return "release.clusterregistry.k8s.io/" + name }
