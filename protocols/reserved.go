package protocols

// GatewayTopic reports whether a bus topic or filter lies in the gateway's
// own namespace: its first level starts with '$', as in
// "$SYS/edgemux/stats", where the gateway publishes its state. Devices
// may not publish there, and only sessions the gateway's operator access
// rules admit may subscribe (the WebSocket's, config admin.operator); the
// bus already keeps these topics out of reach of root wildcards ("#",
// "+/x"), as MQTT reserves them.
func GatewayTopic[T ~string | ~[]byte](s T) bool { return len(s) > 0 && s[0] == '$' }
