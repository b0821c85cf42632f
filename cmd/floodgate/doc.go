// Command floodgate runs one node of a floodgate cluster. With no flags it
// creates a single-node cluster on loopback with its data in
// ./floodgate-data; --join adds it to an existing cluster.
package main
