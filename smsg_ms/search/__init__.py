"""Exact strategy search (min-plus chain of segments, Third Homomorphism Theorem)."""
from .brute import solve_brute_force
from .ilp import solve_ilp
from .problem import Edge, NoFeasiblePlan, SearchProblem, Solution, Variable
from .solve import solve

__all__ = ["Edge", "NoFeasiblePlan", "SearchProblem", "Solution", "Variable", "solve",
           "solve_brute_force", "solve_ilp"]
