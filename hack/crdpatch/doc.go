// Command crdpatch applies to the generated CRDs the schema settings that controller-gen has
// no marker for. hack/update-codegen.sh runs it after controller-gen.
//
// Three settings (the last one for every CRD, the others for the Cluster CRD's fields):
//   - a maxLength on provider config values (controller-gen bounds slice items but not map
//     values). Without it the API server estimates the CEL rules over config as if every value
//     could be as large as a request, and refuses the CRD;
//   - no `format: byte` on caBundle. The server checks that format before any CEL rule, and its
//     error repeats the whole value: a PEM file pasted without base64-encoding it (private key
//     included) came back in the error, twice. The CEL rules on the enclosing object check the
//     base64 instead, and name the field without the value;
//   - descriptions reflowed into paragraphs, as Kubernetes' own openapi-gen does, so that
//     kubectl explain wraps them to the terminal instead of at the Go comment's line breaks.
package main
