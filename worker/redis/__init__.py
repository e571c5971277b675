"""Everything this project keeps on Redis besides the state store: the one client factory and error mapping
(`redis.client`), every key shape (`redis.keys`), leases and marks (`redis.leases`), run progress
(`redis.progress`)."""
