// Package chartrepo fetches packaged Helm charts for Releases from OCI registries (oci://) and
// HTTP chart repositories (an index.yaml and the archives it lists), the way the rest of the SDK
// treats what a registry's writers choose:
//
//   - Requests go only to the repository named: every request of a fetch must be to the
//     repository URL's own scheme, host and port. A redirect is refused, and so is a chart that an
//     index places on another host, or a registry whose token service is elsewhere. Each refusal
//     names where it would have gone.
//   - Credentials are pointers: a Release names a Secret of its namespace, and the Secret itself
//     says where its credentials may go (CredentialsFromSecret): a dockerconfigjson Secret's entry
//     for the repository's host, or a basic-auth Secret whose clusterregistry.k8s.io/servers
//     annotation names the repository. Whoever writes a Release cannot send them elsewhere.
//   - What is fetched is bounded (an index, a chart: Options) and checked: a chart whose digest
//     differs from the Release's pin, or from what the index or the registry's manifest says, is
//     refused.
//   - Charts are kept by digest, and a version range is resolved again only every
//     Options.ResolveEvery, so that a fleet of Releases of one chart downloads it once.
//
// Plain http:// (and OCI registries spoken to without TLS) is refused unless Options.AllowPlainHTTP
// says otherwise.
package chartrepo
