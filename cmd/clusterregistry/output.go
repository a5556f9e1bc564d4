package main

import (
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

// writeObject writes v as -o asks: "json" (indented, as kubectl writes it) or "yaml".
func writeObject(w io.Writer, v any, output string) error {
	var data []byte
	var err error
	if output == "json" {
		data, err = json.MarshalIndent(v, "", "  ")
		data = append(data, '\n')
	} else {
		data, err = yaml.Marshal(v)
	}
	if err != nil {
		return err
	}
	_, err = w.Write(data)
	return err
}
