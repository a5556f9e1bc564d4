package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
	"github.com/cluster-registry/sdk/localfleet"
)

func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain ASCII\tand a tab\n":             "plain ASCII\tand a tab\n",
		"Zürich, 東京, emoji 🚀":                  "Zürich, 東京, emoji 🚀",
		"\x1b[2J\x1b[Hcleared":                 "^[[2J^[[Hcleared",
		"\x1b]52;c;ZXZpbA==\x07":               "^[]52;c;ZXZpbA==^G",
		"over\rwritten":                        `over\rwritten`,
		"back\b\b\bspace and \x7f":             "back^H^H^Hspace and ^?",
		"C1 CSI \u009b2J":                      `C1 CSI \u009b2J`,
		"not UTF-8: \x9b2J, \xff":              `not UTF-8: \x9b2J, \xff`,
		"\x00nul":                              "^@nul",
		"NBSP\u00a0is printable, as is \u00e9": "NBSP\u00a0is printable, as is \u00e9",
	} {
		require.Equal(t, want, visible(in), "%q", in)
	}
}

// A character split across writes (a buffer flushed mid-character) is written whole, and one
// never completed is shown as its bytes at the end.
func TestTerminalSafeWrites(t *testing.T) {
	var out bytes.Buffer
	w := &terminalSafe{w: &out}
	for _, b := range []byte("é 🚀\x1b") {
		n, err := w.Write([]byte{b})
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	_, _ = w.Write([]byte("ok\xe6\x9d"))
	require.NoError(t, w.Flush())
	require.Equal(t, `é 🚀^[ok\xe6\x9d`, out.String())
}

// Whoever edits a Cluster, or answers for its member, writes what clusterregistry get and describe
// print; control characters there would drive the reader's terminal (clear it, print over what
// came before, set the clipboard). They are shown instead, and other text is left as it is. It
// runs on TestImportFromKubeconfig's registry.
func getAndDescribeDoNotDriveTheTerminal(t *testing.T, lf *localfleet.Fleet) {
	ctx := t.Context()
	const hostile = "\x1b[2J\x1b]52;c;ZXZpbA==\x07\u009b1A\rall fine"
	clusters := versioned.NewForConfigOrDie(lf.Registry.Config).ClusterregistryV1alpha1().Clusters(lf.Namespace)
	c, err := clusters.Create(ctx, &v1alpha1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: "tricky"},
		Spec: v1alpha1.ClusterSpec{
			DisplayName: "Zürich " + hostile,
			KubernetesAPIEndpoints: v1alpha1.KubernetesAPIEndpoints{
				ServerEndpoints: []v1alpha1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "https://tricky.example"}},
			},
			AuthInfo: v1alpha1.AuthInfo{Providers: []v1alpha1.AuthProviderConfig{{Name: "p", Type: v1alpha1.AuthProviderType{Name: "secret"},
				Config: map[string]string{"name": "tricky", "note": hostile}}}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	c.Status.Conditions = []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: "NotReady",
		Message: "failing checks: " + hostile, LastTransitionTime: metav1.Now()}}
	_, err = clusters.UpdateStatus(ctx, c, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = kubernetes.NewForConfigOrDie(lf.Registry.Config).CoreV1().Events(lf.Namespace).Create(ctx, &corev1.Event{
		ObjectMeta:     metav1.ObjectMeta{GenerateName: "tricky-"},
		InvolvedObject: corev1.ObjectReference{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Cluster", Namespace: lf.Namespace, Name: "tricky", UID: c.UID},
		Type:           corev1.EventTypeWarning, Reason: "NotReady", Message: hostile, LastTimestamp: metav1.Now(),
	}, metav1.CreateOptions{})
	require.NoError(t, err)

	cli := commandLine(context.Background(), lf.Registry.Kubeconfig, lf.Namespace)
	for _, args := range [][]string{{"describe", "tricky"}, {"get", "-o", "wide"}, {"get", "nosuch" + hostile}} {
		_, stdout, stderr := cli(args...)
		out := stdout + stderr
		t.Logf("%s:\n%s", args[0], out)
		require.NotContains(t, out, "\x1b", args)
		require.NotContains(t, out, "\r", args)
		require.NotContains(t, out, "\a", args)
		require.NotContains(t, out, "\u009b", args)
		want := `^[[2J^[]52;c;ZXZpbA==^G\u009b1A\rall fine`
		if args[0] == "get" && args[1] == "-o" {
			// kubectl's table printer shows a cell's first line, then "...": a carriage return ends one.
			want = `^[[2J^[]52;c;ZXZpbA==^G\u009b1A...`
		}
		require.Contains(t, out, want, args)
	}
	_, stdout, _ := cli("describe", "tricky")
	require.Contains(t, stdout, "Zürich ^[[2J", "text that is not a control is printed as it is")
	require.Equal(t, 4, strings.Count(stdout, `^[[2J`), "the display name, the provider config, the condition and the Event:\n%s", stdout)
}
