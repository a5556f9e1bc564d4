package clusterregistry_test

import (
	"context"
	"fmt"
	"time"

	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/cluster-registry/sdk/clientset/versioned"
	"github.com/cluster-registry/sdk/clusterregistry"
)

// A tool makes any cluster a registry by installing the CRD at start-up, then lists the
// production members of one cluster set (namespace).
func ExampleInstall() {
	cfg, err := clientcmd.BuildConfigFromFlags("", clientcmd.RecommendedHomeFile)
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	installed, err := clusterregistry.Install(ctx, apiextensionsclient.NewForConfigOrDie(cfg))
	if err != nil {
		panic(err)
	}
	fmt.Println(installed) // for example: CRD clusters.clusterregistry.k8s.io is up to date at schema version 10 (and a line for each other CRD)

	registry := versioned.NewForConfigOrDie(cfg)
	list, err := registry.ClusterregistryV1alpha1().Clusters("fleet").List(ctx, metav1.ListOptions{LabelSelector: "env=prod"})
	if err != nil {
		panic(err)
	}
	for _, c := range list.Items {
		fmt.Println(c.Name, c.Spec.DisplayName, c.IsReady())
	}
}
