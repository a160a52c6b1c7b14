"""One inference server's life, never leaked: started, checked and stopped (`process`), waited on
until it answers ready (`ready`), how it ended (`exits`), what it says about itself (`probes`) and
how its HTTP answers are quoted (`answers`), and `launching`, the block every caller starts servers
in (`launch`)."""
