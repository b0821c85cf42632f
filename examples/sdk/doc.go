// Command sdk shows floodgate's Go SDK against the `make run` node: it
// stores a policy, checks it through a policy handle, and serves an HTTP
// endpoint limited by the SDK's middleware on 127.0.0.1:8080 (-addr and
// -listen change the node and the address served).
//
//	go run ./examples/sdk
//	curl -i -H 'X-User: 42' 127.0.0.1:8080/   # 200 ×3, then 429
package main
