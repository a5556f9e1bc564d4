// Package execcredential is the client.authentication.k8s.io exec-plugin protocol over the
// registry: kubectl (or any client-go program) asks a plugin for a member's credentials, and the
// plugin answers with what the SDK resolved for that member's Cluster, short-lived, and only when
// the client is about to call the very server the credentials were resolved for, verified the
// same way. `clusterregistry credential` is this package behind flags; a tool that offers kubectl
// access through the registry answers with it without shelling out.
//
//	req, err := execcredential.ParseRequest([]byte(os.Getenv(execcredential.InfoEnv)))
//	...
//	resolved, err := resolver.Resolve(ctx, cluster)
//	...
//	answer, err := execcredential.Answer(ctx, req, resolved)
//	...
//	err = json.NewEncoder(os.Stdout).Encode(answer)
package execcredential
