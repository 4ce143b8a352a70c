module github.com/gpubot/gpubot

go 1.26.0

require (
	github.com/google/go-cmp v0.7.0
	go.etcd.io/bbolt v1.5.0
	go.yaml.in/yaml/v3 v3.0.6
	golang.org/x/term v0.48.0
)

require golang.org/x/sys v0.50.0 // indirect
