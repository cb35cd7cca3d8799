module github.com/edgemux/edgemux/examples/bench/fanoutcompare

go 1.26.8
