package main

import (
	"fmt"
	"os"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/cluster-registry/sdk/clusterregistry/v1alpha1"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: crdpatch CRD.yaml...")
		os.Exit(2)
	}
	for _, path := range os.Args[1:] {
		if err := patchFile(path); err != nil {
			fmt.Fprintln(os.Stderr, "crdpatch:", err)
			os.Exit(1)
		}
	}
}

func patchFile(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	maxLen := int64(v1alpha1.MaxProviderConfigValueLength)
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if crd.Spec.Names.Kind != "Cluster" { // the Placement CRD needs its descriptions reflowed only
			reflowDescriptions(v.Schema.OpenAPIV3Schema)
			continue
		}
		err := patch(v.Schema.OpenAPIV3Schema, []string{"spec", "authInfo", "providers", "[]", "config"},
			func(config *apiextensionsv1.JSONSchemaProps) error {
				if config.AdditionalProperties == nil || config.AdditionalProperties.Schema == nil {
					return fmt.Errorf("config has no additionalProperties schema")
				}
				config.AdditionalProperties.Schema.MaxLength = &maxLen
				return nil
			})
		if err != nil {
			return fmt.Errorf("%s: version %s: %w", path, v.Name, err)
		}
		err = patch(v.Schema.OpenAPIV3Schema, []string{"spec", "kubernetesApiEndpoints", "caBundle"},
			func(ca *apiextensionsv1.JSONSchemaProps) error {
				if ca.Format != "byte" {
					return fmt.Errorf("caBundle has format %q, want byte", ca.Format)
				}
				ca.Format = ""
				return nil
			})
		if err != nil {
			return fmt.Errorf("%s: version %s: %w", path, v.Name, err)
		}
		reflowDescriptions(v.Schema.OpenAPIV3Schema)
	}
	out, err := yaml.Marshal(crd)
	if err != nil {
		return err
	}
	return os.WriteFile(path, append([]byte("---\n"), out...), 0o644)
}

// patch applies fn to the schema found by following property names ("[]" steps into array items)
// from s. Properties holds schemas by value, so each changed child is written back.
func patch(s *apiextensionsv1.JSONSchemaProps, steps []string, fn func(*apiextensionsv1.JSONSchemaProps) error) error {
	if len(steps) == 0 {
		return fn(s)
	}
	if steps[0] == "[]" {
		if s.Items == nil || s.Items.Schema == nil {
			return fmt.Errorf("no items schema where %v was expected", steps)
		}
		return patch(s.Items.Schema, steps[1:], fn)
	}
	child, ok := s.Properties[steps[0]]
	if !ok {
		return fmt.Errorf("no property %q where %v was expected", steps[0], steps)
	}
	if err := patch(&child, steps[1:], fn); err != nil {
		return err
	}
	s.Properties[steps[0]] = child
	return nil
}

// reflowDescriptions joins the lines of each paragraph of every description in the schema.
func reflowDescriptions(s *apiextensionsv1.JSONSchemaProps) {
	s.Description = reflow(s.Description)
	for name, child := range s.Properties {
		reflowDescriptions(&child)
		s.Properties[name] = child
	}
	if s.Items != nil && s.Items.Schema != nil {
		reflowDescriptions(s.Items.Schema)
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		reflowDescriptions(s.AdditionalProperties.Schema)
	}
}

// reflow keeps blank-line paragraph breaks and turns every other line break into a space.
func reflow(text string) string {
	paragraphs := strings.Split(text, "\n\n")
	for i, p := range paragraphs {
		paragraphs[i] = strings.Join(strings.Fields(p), " ")
	}
	return strings.Join(paragraphs, "\n\n")
}
