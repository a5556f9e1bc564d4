// Package trustflags gives a command the Resolver's trust options as flags, for tools that reach a
// registry's members on a user's behalf: which provider types to use, which exec plugins and files
// the Clusters, written by others, may make this machine run and read, and to which servers the
// credentials from this machine may go.
//
// By default a Cluster can make the tool run nothing and read nothing. Each flag widens that by
// exactly what it names:
//
//	--allow-exec=CMD              Clusters may name CMD; it runs with no arguments of theirs
//	--allow-exec-args='CMD ARGS'  Clusters may run CMD with arguments that fit the pattern ARGS:
//	                              "*" for one value (never a flag), "--flag=*" for any value of it
//	--allow-exec-any-args=CMD     Clusters may run CMD with any arguments (dangerous; see its help)
//	--file-root=DIR               token-file and kubeconfig-file providers may read under DIR
//	--send-to=SERVER              where this machine's credentials (plugins, files) may go, or *
//	--prefer=TYPE                 provider types to use, in order
//
// clusterregistry's health, credential and export commands and examples/fanout-deploy take them
// alike; ToResolver makes the Resolver they describe, as kubectl's ConfigFlags.ToRESTConfig makes a
// config, and Args writes them back, for a command line that another program runs.
package trustflags
