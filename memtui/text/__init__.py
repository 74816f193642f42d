"""Text for people: what the commands print (check's verdict, JUnit and CI annotations;
compare's lines; the what-if replay's report). Pure functions over the analyses' results;
nothing here computes a figure."""
