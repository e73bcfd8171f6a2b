// The etcd server, built from go.etcd.io/etcd/server/v3. That module's go.mod replaces its
// sibling modules with relative paths, so `go install` refuses it; this module requires it
// and its siblings at one version instead.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
