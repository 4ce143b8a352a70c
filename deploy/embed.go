// Package deploy holds what gpubot needs to run outside this repository:
// Kubernetes manifests, the Slack app manifest, an example Kueue setup,
// and the example configuration that gpubot embeds as its default.
//
// Only the example configuration is Go: ExampleConfig is the file
// gpubot.example.yaml beside this one, which package config parses when
// gpubot is started without a configuration file.
package deploy

import _ "embed" // for go:embed

// ExampleConfig is gpubot.example.yaml: a simulated cluster of 16 H100 and
// 8 A100 nodes shared by three teams, with work already running on it.
//
//go:embed gpubot.example.yaml
var ExampleConfig []byte
