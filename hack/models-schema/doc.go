// Command models-schema prints, as an OpenAPI v2 document on stdout, the definitions that
// openapi-gen generated in internal/openapi. hack/update-codegen.sh passes the document to
// applyconfiguration-gen (--applyconfig-openapi-schema), which embeds the structured-merge-diff
// schema of the Cluster types in applyconfiguration/internal. Without it that schema is empty, and
// the fake clientset's NewClientset fails on every Cluster it is given
// (kubernetes/kubernetes#126850).
package main
