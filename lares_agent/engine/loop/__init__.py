"""The LaRes loop: configs, the reward slots and their update, fitness, selection, Thompson sampling, counters
and run log, and the SAC and ES engines. The public names are exported by ``lares_agent.engine``."""
