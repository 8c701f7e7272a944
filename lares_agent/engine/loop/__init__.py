"""The LaRes loop: configs, the reward slots and their update, fitness, selection, Thompson sampling, counters
and run log, and the engines: LaResEngine (SAC or CrossQ on a replay buffer) and ESEngine. The public names are
exported by ``lares_agent.engine``."""
