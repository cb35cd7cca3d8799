//go:build !race

package private

const raceBuild = false
