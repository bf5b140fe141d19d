"""Memory: the port (six commands on `/memories`), the one command engine, its adapters
(in-process, Git private refs), the conformance kit, the mechanics over the port, and
scope export, import and drop."""
