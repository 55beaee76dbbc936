from dense_pt.cli import main

main()
