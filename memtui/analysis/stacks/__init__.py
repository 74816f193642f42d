"""Who asked for the bytes: call stacks and their user frames (:mod:`.callstack`), the
stack tree of live bytes (:mod:`.stack_tree`), owners (:mod:`.owner_tree`) and the
time-axis call flame of a python trace (:mod:`.call_flame`)."""
