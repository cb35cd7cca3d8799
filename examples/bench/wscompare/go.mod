module github.com/edgemux/edgemux/examples/bench/wscompare

go 1.26.8

require github.com/gorilla/websocket v1.5.3

require (
	github.com/lesismal/llib v1.2.2 // indirect
	github.com/lesismal/nbio v1.6.8
	golang.org/x/crypto v0.0.0-20210513122933-cd7d49e622d5 // indirect
	golang.org/x/sys v0.0.0-20210423082822-04245dca01da // indirect
)
