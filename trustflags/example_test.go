package trustflags_test

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/trustflags"
)

// A tool takes the trust flags, and so lets its user say which exec plugins Clusters may run, with
// which arguments, and where their credentials may go.
func ExampleFlags() {
	var trust trustflags.Flags
	fs := pflag.NewFlagSet("my-tool", pflag.ContinueOnError)
	trust.AddFlags(fs)
	_ = fs.Parse([]string{
		"--allow-exec-args=aws eks get-token --cluster-name * --region *",
		"--send-to=https://prod.eks.example.com",
	})

	// The Resolver, reading Secrets through the registry's client (here a fake one), as the
	// tool's user; an error names the flag at fault.
	var registryKube kubernetes.Interface = fake.NewClientset()
	_, err := trust.ToResolver(registryKube, "my-tool")
	fmt.Println(err)

	// What the flags allow, as options.
	opts, _ := trust.ResolverOptions()
	fmt.Println(opts.ExecPlugins[0].Command, opts.ExecPlugins[0].ArgsPattern)
	fmt.Println(access.MatchArgs(opts.ExecPlugins[0].ArgsPattern, []string{"eks", "get-token", "--cluster-name", "prod", "--region", "eu-west-1"}))
	fmt.Println(access.MatchArgs(opts.ExecPlugins[0].ArgsPattern, []string{"eks", "get-token", "--cluster-name", "--profile=admin", "--region", "eu-west-1"}))
	// Output:
	// <nil>
	// aws [eks get-token --cluster-name * --region *]
	// true
	// false
}
