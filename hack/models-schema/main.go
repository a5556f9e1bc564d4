package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/util"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/cluster-registry/sdk/internal/openapi"
)

func main() {
	if len(os.Args) != 1 {
		fmt.Fprintln(os.Stderr, "usage: models-schema > schema.json")
		os.Exit(2)
	}
	out, err := json.MarshalIndent(document(openapi.GetOpenAPIDefinitions), "", "  ")
	if err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
	if _, err := os.Stdout.Write(append(out, '\n')); err != nil {
		fmt.Fprintf(os.Stderr, "models-schema: %v\n", err)
		os.Exit(1)
	}
}

// document is the OpenAPI v2 document holding every definition that get returns, keyed and
// referenced by the names an API server publishes (com.github.cluster-registry.sdk...), which are
// the names applyconfiguration-gen and runtime.Scheme look types up by.
func document(get common.GetOpenAPIDefinitions) *spec.Swagger {
	ref := func(name string) spec.Ref { return spec.MustCreateRef("#/definitions/" + modelName(name)) }
	defs := get(ref)
	schemas := make(spec.Definitions, len(defs))
	for name, def := range defs {
		schema := def.Schema
		// A type that publishes a different schema for OpenAPI v2 (IntOrString, Quantity) embeds
		// it; this document is v2.
		if v2, ok := def.Schema.Extensions[common.ExtensionV2Schema].(spec.Schema); ok {
			schema = v2
		}
		schemas[modelName(name)] = schema
	}
	return &spec.Swagger{SwaggerProps: spec.SwaggerProps{
		Swagger:     "2.0",
		Info:        &spec.Info{InfoProps: spec.InfoProps{Title: "clusterregistry.k8s.io", Version: "unversioned"}},
		Definitions: schemas,
	}}
}

// modelName turns a Go type's canonical name (github.com/x/y/v1.T) into its OpenAPI model name
// (com.github.x.y.v1.T). Names without a slash are model names already: apimachinery's types
// declare theirs (io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta), and reversing them again would
// break every reference to ObjectMeta.
func modelName(name string) string {
	if !strings.Contains(name, "/") {
		return name
	}
	return util.ToRESTFriendlyName(name)
}
