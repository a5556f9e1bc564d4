package trustflags

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cluster-registry/sdk/access"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/testkit/testcerts"
)

func parse(t *testing.T, args ...string) (*Flags, access.ResolverOptions, error) {
	t.Helper()
	var f Flags
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	f.AddFlags(fs)
	require.NoError(t, fs.Parse(args))
	o, err := f.ResolverOptions()
	return &f, o, err
}

// Each flag allows what it names and no more: --allow-exec no arguments of the Cluster's,
// --allow-exec-args a pattern (quoted words kept whole, commas too), --allow-exec-any-args any.
func TestResolverOptions(t *testing.T) {
	f, o, err := parse(t,
		"--allow-exec=gke-gcloud-auth-plugin,kubelogin",
		`--allow-exec-args=aws eks get-token --cluster-name * --region=* --scopes "a, b"`,
		"--allow-exec-any-args=legacy",
		"--file-root=/var/run/secrets/tokens",
		"--send-to=https://a.example.com,b.example.com:6443",
		"--prefer=exec,token-file")
	require.NoError(t, err)
	require.Equal(t, []string{"exec", "token-file"}, o.Prefer)
	require.Len(t, o.ExecPlugins, 4)
	for _, p := range o.ExecPlugins[:2] {
		require.Nil(t, p.ArgsPattern)
		require.False(t, p.ClusterArgs)
	}
	require.Equal(t, "aws", o.ExecPlugins[2].Command)
	require.Equal(t, []string{"eks", "get-token", "--cluster-name", "*", "--region=*", "--scopes", "a, b"}, o.ExecPlugins[2].ArgsPattern)
	require.False(t, o.ExecPlugins[2].ClusterArgs)
	require.True(t, o.ExecPlugins[3].ClusterArgs)
	require.Equal(t, "/var/run/secrets/tokens", o.FileRoots[0].Dir)
	for _, p := range o.ExecPlugins {
		require.NotNil(t, p.SendTo)
	}
	_, err = access.NewResolver(o)
	require.NoError(t, err)

	// Written back, the flags read the same.
	_, again, err := parse(t, f.Args()...)
	require.NoError(t, err)
	require.Equal(t, len(o.ExecPlugins), len(again.ExecPlugins))
	for i := range o.ExecPlugins {
		require.Equal(t, o.ExecPlugins[i].Command, again.ExecPlugins[i].Command)
		require.Equal(t, o.ExecPlugins[i].ArgsPattern, again.ExecPlugins[i].ArgsPattern)
		require.Equal(t, o.ExecPlugins[i].ClusterArgs, again.ExecPlugins[i].ClusterArgs)
	}

	// Nothing given, nothing trusted.
	_, o, err = parse(t)
	require.NoError(t, err)
	require.Empty(t, o.ExecPlugins)
	require.Empty(t, o.FileRoots)
}

// Bad values are named by their flag.
func TestResolverOptionsErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"--prefer=vault"}, `--prefer: unknown provider type "vault"`},
		{[]string{"--allow-exec=aws eks get-token"}, "a command with arguments goes in --allow-exec-args"},
		{[]string{"--allow-exec-args="}, "--allow-exec-args is empty"},
		{[]string{`--allow-exec-args=aws "eks`}, "a double quote is not closed"},
		{[]string{"--allow-exec-any-args=a b"}, "--allow-exec-any-args"},
		{[]string{"--send-to=*,https://a.example.com"}, "* stands for every server"},
		{[]string{"--send-to=ftp://a.example.com"}, `--send-to "ftp://a.example.com"`},
		{[]string{"--tunnel-server=tunnel.example.com"}, `--tunnel-server "tunnel.example.com": want host:port`},
		{[]string{"--tunnel-server=tunnel.example.com:8090"}, "--tunnel-ca is required with --tunnel-server"},
		{[]string{"--tunnel-server=tunnel.example.com:8090", "--tunnel-ca=/nonexistent/ca.crt", "--tunnel-cert=c", "--tunnel-key=k"}, "--tunnel-ca: open /nonexistent/ca.crt"},
		{[]string{"--tunnel-cert=c.crt"}, "are for --tunnel-server, which is not given"},
	} {
		_, _, err := parse(t, tc.args...)
		require.ErrorContains(t, err, tc.says, "%v", tc.args)
	}
}

// What join --exec tells readers to allow is a flag that allows exactly that plugin and its args,
// white space and quotes included.
func TestAllowExecArgsFor(t *testing.T) {
	args := []string{"get-token", "--cluster", "prod eu", `it's "quoted"`, `back\slash`}
	flag, ok := AllowExecArgsFor("/usr/bin/cloud", args)
	require.True(t, ok)
	require.True(t, strings.HasPrefix(flag, "--allow-exec-args='/usr/bin/cloud get-token --cluster \"prod eu\" "), flag)
	// What a shell makes of the single quotes, and then the flag of the words.
	value := strings.TrimPrefix(flag, "--allow-exec-args=")
	value = strings.ReplaceAll(strings.Trim(value, "'"), `'\''`, "'")
	words, err := splitWords(value)
	require.NoError(t, err)
	require.Equal(t, append([]string{"/usr/bin/cloud"}, args...), words)

	_, ok = AllowExecArgsFor("x", []string{"--region=*"})
	require.False(t, ok, "a literal =* would read as a wildcard")
}

func FuzzSplitWords(f *testing.F) {
	for _, s := range []string{`a b`, `"a b" 'c d' e\ f`, `"\"" '\'`, `x "y`, "\t\n", `""`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		words, err := splitWords(s)
		if err != nil {
			return
		}
		again, err := splitWords(joinWords(words))
		if err != nil || !slices.Equal(words, again) {
			t.Fatalf("split %q = %q; joined and split again: %q, %v", s, words, again, err)
		}
	})
}

// A command's errors name its flags where the Resolver's name Go options.
func TestInFlagTerms(t *testing.T) {
	inner := fmt.Errorf("%w: the path is not under any of ResolverOptions.FileRoots", access.ErrNotAllowed)
	err := InFlagTerms(inner)
	require.EqualError(t, err, "not allowed by the resolver's options: the path is not under any of --file-root")
	require.ErrorIs(t, err, access.ErrNotAllowed)
	require.EqualError(t, InFlagTerms(errors.New("ResolverOptions.ExecPlugins[2].SendTo does not allow it")), "--send-to does not allow it")
	require.EqualError(t, InFlagTerms(errors.New("the exec args neither equal ResolverOptions.ExecPlugins[0].Args nor fit ResolverOptions.ExecPlugins[0].ArgsPattern")),
		"the exec args neither equal the arguments that --allow-exec-args gives nor fit --allow-exec-args's pattern")
	require.EqualError(t, InFlagTerms(errors.New("not among ResolverOptions.ExecPlugins; add an ExecPlugin for it to run it")),
		"not among --allow-exec or --allow-exec-args; allow the command to run it")
	require.Nil(t, InFlagTerms(nil))
}

// ToResolver reads Secrets through the client it is given, sends the user agent it is given, and
// refuses flags it cannot use, naming them.
func TestToResolver(t *testing.T) {
	f, _, err := parse(t)
	require.NoError(t, err)
	ca := testcerts.CAPEM()
	kube := fake.NewClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "dev-token",
			Annotations: map[string]string{v1alpha1.ServersAnnotation: "https://dev.example.com"}},
		Data: map[string][]byte{v1alpha1.SecretTokenKey: []byte("t0ken"), v1alpha1.SecretCAKey: ca},
	})
	r, err := f.ToResolver(kube, "my-tool/1.0")
	require.NoError(t, err)
	resolved, err := r.Resolve(t.Context(), &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: "fleet", Name: "dev", UID: "u1"},
		Spec: v1alpha1.ClusterSpec{
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://dev.example.com"}}},
			AuthInfo:               v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "token", Type: v1alpha1.AuthProviderType{Name: v1alpha1.ProviderTypeSecret}, Config: map[string]string{"name": "dev-token"}}}},
		},
	})
	require.NoError(t, err, "the Secret is read through the client given")
	require.Equal(t, "t0ken", resolved.Config.BearerToken)
	require.Equal(t, "my-tool/1.0", resolved.Config.UserAgent)

	f, _, _ = parse(t, "--prefer=nope")
	_, err = f.ToResolver(kube, "my-tool")
	require.ErrorContains(t, err, "--prefer: unknown provider type \"nope\"")
}
