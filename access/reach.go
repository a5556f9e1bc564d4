package access

import (
	"hash/maphash"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

// reachSeed keys ReachDigest for this process: a digest is never stored or sent, and whoever
// writes Clusters cannot know the seed, so cannot make two reaches collide on purpose.
var reachSeed = maphash.MakeSeed()

// ReachDigest digests what in a ClusterSpec decides how its member is reached: the server
// endpoints (client CIDR and address, in order), the CA bundle, and the auth providers (name,
// type and config, in order; each config's entries in any order). The display name and anything
// else of the spec do not count. It is the one definition of "how a member is reached changed":
// the Resolver keys its cache by it, and a Fleet announces multicluster.MemberReachChanged when it
// changes.
//
// Two specs that reach differently have different digests but for a chance of one in 2^64,
// within one process (the digest is keyed by a random seed of the process). It allocates
// nothing: it runs on every Resolve.
func ReachDigest(s *v1alpha1.ClusterSpec) uint64 {
	h := uint64(14695981039346656037)
	mix := func(v uint64) { h = (h ^ v) * 1099511628211 }
	eps := s.KubernetesAPIEndpoints.ServerEndpoints
	mix(uint64(len(eps)))
	for i := range eps {
		mix(maphash.String(reachSeed, eps[i].ClientCIDR))
		mix(maphash.String(reachSeed, eps[i].ServerAddress))
	}
	mix(maphash.Bytes(reachSeed, s.KubernetesAPIEndpoints.CABundle))
	providers := s.AuthInfo.Providers
	mix(uint64(len(providers)))
	for i := range providers {
		p := &providers[i]
		mix(maphash.String(reachSeed, p.Name))
		mix(maphash.String(reachSeed, p.Type.Name))
		var config uint64
		for k, v := range p.Config {
			config += maphash.String(reachSeed, k)*0x9E3779B97F4A7C15 ^ maphash.String(reachSeed, v)
		}
		mix(uint64(len(p.Config)))
		mix(config)
	}
	return h
}
